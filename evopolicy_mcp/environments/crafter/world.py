"""Crafter made deterministic and cheap per episode: the only module that touches Crafter.

Imported only when a crafter task is described or evaluated. :class:`Game` is
``crafter.Env`` (1.8.3) with these changes, each for a reason:

- The creatures of a chunk are balanced in position order. Upstream iterates
  a set of objects, whose order follows memory addresses, so the same seed and
  actions gave different worlds in different processes.
- The night-time noise of the image draws from its own generator, so
  rendering (pixel observations, replays) never changes what happens.
- No image and no semantic map are made unless asked (symbolic observations
  save most of a step), and textures are loaded once per process.

World generation is Crafter's own. With ``opensimplex==0.3`` it takes about a
quarter of the time of 0.4 and gives identical worlds (the tests compare md5s
of worlds made with 0.4.5).
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

import crafter
import numpy as np
from crafter import constants, engine, objects

from evopolicy_mcp.environments.crafter.names import (
    ACTIONS,
    ENTITIES,
    ITEMS,
    MATERIALS,
    VIEW_COLS,
    VIEW_ROWS,
)

__all__ = ["Game", "constants"]

if (
    list(constants.actions) != list(ACTIONS)
    or list(constants.items) != list(ITEMS)
    or ["out_of_world", *constants.materials] != list(MATERIALS)
):
    raise ImportError("this crafter has other actions, items or materials than 1.8.3; pin 1.8.3")

_ENTITY = {name: i for i, name in enumerate(ENTITIES)}
_ARROW = {(-1, 0): "arrow_left", (1, 0): "arrow_right", (0, -1): "arrow_up", (0, 1): "arrow_down"}
_textures: Any = None
_textures_lock = threading.Lock()


def _shared_textures() -> Any:
    global _textures
    with _textures_lock:
        if _textures is None:
            _textures = engine.Textures(constants.root / "assets")
        return _textures


_KINDS = (
    (objects.Player, "player"),
    (objects.Cow, "cow"),
    (objects.Zombie, "zombie"),
    (objects.Skeleton, "skeleton"),
    (objects.Fence, "fence"),
)


def _entity(obj: Any) -> int:
    if isinstance(obj, objects.Arrow):
        return _ENTITY[_ARROW[(int(obj.facing[0]), int(obj.facing[1]))]]
    if isinstance(obj, objects.Plant):
        return _ENTITY["plant_ripe" if obj.ripe else "plant_young"]
    return next((_ENTITY[name] for kind, name in _KINDS if isinstance(obj, kind)), 0)


class _View(engine.LocalView):
    """The local image view; its night noise has a generator of its own."""

    def __init__(self, world: Any, textures: Any, grid: list[int], seed: int) -> None:
        super().__init__(world, textures, grid)
        self._rng = np.random.RandomState(seed % 2**32)

    def _noise(self, canvas: np.ndarray, amount: float, stddev: float) -> np.ndarray:
        noise = self._rng.uniform(32, 127, canvas.shape[:2])[..., None]
        mask = amount * self._vignette(canvas.shape, stddev)[..., None]
        return (1 - mask) * canvas + mask * noise


class _Player(objects.Player):
    """Crafter's player, noting the source of every loss of health.

    The source is read from the frame that set the health: the player's own
    ``_move`` (lava), its ``_degen_or_regen_health`` (a need at zero), a
    zombie's ``update`` or an arrow's ``update``. Upstream has no hook for it.
    """

    health_lost: dict[str, int]
    last_cause: str | None

    @property
    def health(self) -> int:
        return int(self.inventory["health"])

    @health.setter
    def health(self, value: float) -> None:
        before = self.inventory["health"]
        self.inventory["health"] = max(0, value)
        lost = int(before - self.inventory["health"])
        if lost > 0:
            cause = self._cause(sys._getframe(1))
            self.health_lost[cause] = self.health_lost.get(cause, 0) + lost
            self.last_cause = cause

    def _cause(self, frame: FrameType) -> str:
        actor = frame.f_locals.get("self")
        if isinstance(actor, objects.Zombie):
            return "zombie"
        if isinstance(actor, objects.Arrow):
            return "arrow"
        if actor is self and frame.f_code.co_name == "_move":
            return "lava"
        if actor is self and frame.f_code.co_name == "_degen_or_regen_health":
            need = self.inventory
            if need["drink"] <= 0:
                return "thirst"
            if need["food"] <= 0:
                return "starvation"
            if need["energy"] <= 0:
                return "exhaustion"
        return "unknown"


class Game(crafter.Env):
    """One Crafter episode: 64x64 world, 9x9 view (9x7 of terrain), ``length`` steps."""

    def __init__(self, seed: int, length: int, pixels: bool) -> None:
        # crafter.Env.__init__ of 1.8.3 with its defaults, shared textures and our view.
        view, size = np.array((9, 9)), np.array((64, 64))
        self._area, self._view, self._size = (64, 64), view, size
        self._reward, self._length, self._seed, self._episode = True, length, seed, 0
        self._world = engine.World(self._area, constants.materials, (12, 12))
        self._textures = _shared_textures()
        item_rows = int(np.ceil(len(constants.items) / view[0]))
        self._local_view = _View(
            self._world, self._textures, [int(view[0]), int(view[1]) - item_rows], seed
        )
        self._item_view = engine.ItemView(self._textures, [int(view[0]), item_rows])
        self._sem_view = lambda: None  # upstream builds a semantic map every step; unused
        self._step: int | None = None
        self._player: Any = None
        self._last_health: int | None = None
        self._unlocked: set[str] | None = None
        self.reward_range, self.metadata = None, None
        self.pixels = pixels

    def reset(self) -> Any:
        obs = super().reset()
        self._player.__class__ = _Player
        self._player.health_lost, self._player.last_cause = {}, None
        return obs

    def _obs(self) -> Any:
        return self.render() if self.pixels else None

    def _balance_object(self, chunk: Any, objs: Any, *rest: Any) -> None:
        ordered = sorted(objs, key=lambda o: (int(o.pos[0]), int(o.pos[1])))
        super()._balance_object(chunk, ordered, *rest)

    # -- what the policy and the feedback read --------------------------------

    @property
    def player(self) -> Any:
        return self._player

    @property
    def steps(self) -> int:
        return int(self._step or 0)

    @property
    def unlocked(self) -> set[str]:
        return self._unlocked or set()

    @property
    def daylight(self) -> float:
        return float(self._world.daylight)

    def local_view(self) -> tuple[np.ndarray, np.ndarray]:
        """Terrain and entity ids of the 9x7 cells the image shows, ``[row][col]``, row 0 north."""
        world, (px, py) = self._world, (int(self._player.pos[0]), int(self._player.pos[1]))
        terrain = np.zeros((VIEW_COLS, VIEW_ROWS), np.uint8)
        entities = np.zeros((VIEW_COLS, VIEW_ROWS), np.uint8)
        x0, y0 = px - VIEW_COLS // 2, py - VIEW_ROWS // 2
        xa, xb = max(x0, 0), min(x0 + VIEW_COLS, world.area[0])
        ya, yb = max(y0, 0), min(y0 + VIEW_ROWS, world.area[1])
        terrain[xa - x0 : xb - x0, ya - y0 : yb - y0] = world._mat_map[xa:xb, ya:yb]
        index = world._obj_map[xa:xb, ya:yb]
        for i, j in zip(*np.nonzero(index), strict=True):
            entities[xa - x0 + i, ya - y0 + j] = _entity(world._objects[index[i, j]])
        return np.ascontiguousarray(terrain.T), np.ascontiguousarray(entities.T)

    def ahead(self) -> str:
        """What is on the cell the player faces (what ``do`` acts on): a creature or a material."""
        x, y = self._player.pos + np.asarray(self._player.facing)
        material, obj = self._world[(x, y)]
        if obj is not None:
            return ENTITIES[_entity(obj)]
        return "out_of_world" if material is None else str(material)

    def frame(self) -> np.ndarray:
        """The 64x64x3 uint8 image Crafter shows now."""
        return np.asarray(self.render(), dtype=np.uint8)
