"""Agent integrations: run an agent CLI headless against one run of a task.

:mod:`.launch` is the common path (workspace, config, process group, stop,
records); each provider module turns the common :class:`~.launch.AgentTask`
into one CLI's invocation.
"""
