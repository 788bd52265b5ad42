"""robosuite's single-arm manipulation tasks (``adapter`` is the entry point).

``env`` makes a robosuite environment a Gymnasium one (importing it registers
``robosuite/<Task>-v0``): a fixed robot (Panda) and controller (robosuite's default
operational-space pose controller), named state observations, seeded placements.
``adapter`` says what the observations and actions mean.
"""

__all__: list[str] = []
