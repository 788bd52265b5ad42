"""The DeepMind Control Suite (``adapter`` is the entry point).

``env`` makes each suite task a Gymnasium environment (importing it registers
``dm_control/<domain>-<task>-v0``); ``adapter`` serves them through the kit with
the meaning of each domain's observations and actuators.
"""

__all__: list[str] = []
