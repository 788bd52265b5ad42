"""The kernel: what runs inside the template process and every policy process.

Owns the frame codec between host and policy (``frames``), the shared-memory
mailbox (``mailbox``), a policy process's limits (``limits``), what a forked
process does to itself before program code runs (``confine``), the sandbox
layers (``sandbox``, ``linux``, ``cgroups``, ``scratch``), the template that
forks policy processes (``zygote``) and the loop inside one (``child``).

May import: ``policy`` (the ABI), the standard library and numpy. Nothing of
the host side: a policy process holds no module above this layer, so this
``__init__`` imports nothing and names nothing; import the modules themselves.
"""

__all__: list[str] = []
