"""Stable-Retro: classic console games (``adapter`` is the entry point).

Stable-Retro allows one emulator per process, and the host runs several episodes at
once, so each environment's emulator lives in a child process of its own:
``emulator`` is that child's loop, ``env`` the Gymnasium environment that drives it
(importing it registers ``retro/<Game>-v0`` for every game whose ROM ships in the
wheel), ``adapter`` the texts.
"""

__all__: list[str] = []
