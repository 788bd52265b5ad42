"""Meta-World's 50 manipulation tasks, as MT1 poses them (``adapter`` is the entry point).

``env`` registers one Gymnasium id per task (``metaworld/pick-place-v3``) whose goal
is part of the observation; ``adapter`` seeds each episode's object and goal
positions and says what the observation and actions mean.
"""

__all__: list[str] = []
