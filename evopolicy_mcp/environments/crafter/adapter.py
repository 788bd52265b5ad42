"""The Crafter adapter: open-world survival, 22 achievements, up to 10,000 steps.

Task parameters::

    [parameters]
    observation = "symbolic"   # or "pixels": the 64x64x3 uint8 image
    length = 10000             # steps before the episode is cut (Crafter's default)

Crafter is imported only when a spec or an episode is needed
(:mod:`evopolicy_mcp.environments.crafter.world` holds everything that touches it). The
symbolic observation is what the image shows, as ids: the 9x7 cells around
the player, the inventory, facing, sleep and daylight; nothing the player
cannot see. Scores live in :mod:`evopolicy_mcp.environments.crafter.scoring`, the per-episode
tallies, report and replay files in :mod:`evopolicy_mcp.environments.crafter.report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from typing import Any

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import AdapterError, EnvSpec, Step
from evopolicy_mcp.environments.crafter.names import (
    ACTIONS,
    ENTITIES,
    FACING,
    ITEMS,
    MATERIALS,
    VIEW_COLS,
    VIEW_ROWS,
)
from evopolicy_mcp.environments.crafter.report import METRICS, Tally, replay_files
from evopolicy_mcp.environments.crafter.scoring import ACHIEVEMENTS, SCORERS

__all__ = ["CrafterAdapter", "CrafterEpisode", "make_adapter"]

SEED_RANGE = 2**31 - 1  # Crafter seeds its world with hash((seed, 1)) % (2**31 - 1)
PARAMETERS = ("observation", "length")
MAX_LENGTH = 100_000

ACTION_SPACE = spaces.discrete(len(ACTIONS), list(ACTIONS))  # validation only; see _actions


def _actions(constants: Any) -> dict[str, Any]:
    """The action space with meanings spelled out from Crafter's own rules."""

    def uses(rule: Mapping[str, Any]) -> str:
        return " and ".join(f"{n} {item}" for item, n in rule["uses"].items())

    place, make = constants.place, constants.make
    meanings = [
        "noop: do nothing",
        "move_left: face west (-x) and step there if the cell is free",
        "move_right: face east (+x) and step there if free",
        "move_up: face north (-y, the top row of the view) and step there if free",
        "move_down: face south (+y) and step there if free",
        "do: act on the faced cell: collect a material (see metadata.rules.collect), hit a "
        "creature, eat a ripe plant, drink water",
        "sleep: sleep until energy is full (woken early when hurt); restores energy",
        *[
            f"place_{name}: put {what} on the faced cell; needs {uses(place[name])}; "
            f"the cell must be {', '.join(place[name]['where'])}"
            for name, what in (
                ("stone", "stone"),
                ("table", "a table"),
                ("furnace", "a furnace"),
                ("plant", "a sapling"),
            )
        ],
        *[
            f"make_{name}: needs {uses(make[name])} and a {' and a '.join(make[name]['nearby'])} "
            "within one cell (the 3x3 cells around the player)"
            for name in (a.removeprefix("make_") for a in ACTIONS if a.startswith("make_"))
        ],
    ]
    return spaces.discrete(
        len(ACTIONS),
        meanings,
        description="an int 0..16 in Crafter's action order; anything else is invalid_action",
    )


_GRID = (
    f"{VIEW_ROWS} rows x {VIEW_COLS} columns, [row][col], row 0 is north (up); the player is "
    f"always at row {VIEW_ROWS // 2}, col {VIEW_COLS // 2}, so the faced cell is that one plus "
    "facing. The same cells the image shows"
)
SYMBOLIC = spaces.dict_of(
    {
        "terrain": spaces.box(
            0,
            len(MATERIALS) - 1,
            (VIEW_ROWS, VIEW_COLS),
            "uint8",
            description=f"material id of each cell, {_GRID}. Ids: "
            + ", ".join(f"{i} {m}" for i, m in enumerate(MATERIALS)),
        ),
        "entities": spaces.box(
            0,
            len(ENTITIES) - 1,
            (VIEW_ROWS, VIEW_COLS),
            "uint8",
            description=f"creature or object on each cell (0 none), {_GRID}. Ids: "
            + ", ".join(f"{i} {e}" for i, e in enumerate(ENTITIES)),
        ),
        "inventory": spaces.dict_of(
            {item: spaces.discrete(10) for item in ITEMS},
            description="counts 0..9 by name; health, food, drink and energy are the vitals "
            "(start at 9; health falls while any other vital is 0 and regenerates otherwise)",
        ),
        "facing": spaces.discrete(
            4,
            ["left (-x, west)", "right (+x, east)", "up (-y, north)", "down (+y, south)"],
            description="direction the player faces; move_<dir> turns it even when blocked",
        ),
        "sleeping": spaces.discrete(2, ["awake", "asleep"]),
        "daylight": spaces.box(
            0.0, 1.0, (), "float32", description="1 at noon; below about 0.3 is night"
        ),
    },
    description="what the player sees, as ids (numpy uint8 arrays for the grids)",
)
PIXELS = spaces.box(
    0,
    255,
    (64, 64, 3),
    "uint8",
    description="Crafter's RGB image [y][x][channel] as a numpy uint8 array: the 9x7 local view "
    "(7x7 pixels per cell, the player in the middle) above two rows of inventory icons with "
    "counts; darker and noisier at night",
)
_FACING_INDEX = {face: i for i, face in enumerate(FACING)}


class _Config:
    def __init__(self, parameters: Mapping[str, Any]) -> None:
        unknown = sorted(set(parameters) - set(PARAMETERS))
        if unknown:
            raise AdapterError(
                f"unknown crafter parameter(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(PARAMETERS)}"
            )
        mode = parameters.get("observation", "symbolic")
        if mode not in ("symbolic", "pixels"):
            raise AdapterError(f"observation must be 'symbolic' or 'pixels', got {mode!r}")
        length = parameters.get("length", 10_000)
        if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= MAX_LENGTH:
            raise AdapterError(f"length must be an integer in 1..{MAX_LENGTH}, got {length!r}")
        self.observation: str = mode
        self.pixels = mode == "pixels"
        self.length: int = length


class CrafterAdapter:
    name = "crafter"
    example_parameters: dict[str, Any] = {"observation": "symbolic", "length": 300}
    scorers = SCORERS

    def __init__(self) -> None:
        self._validate = spaces.action_validator(ACTION_SPACE)

    def spec(self, parameters: Mapping[str, Any]) -> EnvSpec:
        config = _Config(parameters)
        from evopolicy_mcp.environments.crafter.world import (
            constants,  # imports Crafter, checks its version
        )

        rules = {"collect": constants.collect, "place": constants.place, "make": constants.make}
        return EnvSpec(
            observation_space=PIXELS if config.pixels else SYMBOLIC,
            action_space=_actions(constants),
            metadata={
                "crafter_version": version("crafter"),
                "observation": config.observation,
                "length": config.length,
                "world": "64x64 cells, generated per episode; the player starts in the middle",
                "actions": list(ACTIONS),
                "materials": list(MATERIALS),
                "entities": list(ENTITIES),
                "walkable": list(constants.walkable),
                "achievements": list(ACHIEVEMENTS),
                "rules": rules,
                "reward": "+1 the first time each achievement is unlocked in an episode, "
                "+0.1 per health point gained and -0.1 per point lost",
                "termination": f"terminated when health reaches 0; truncated after "
                f"{config.length} steps",
            },
            metrics=dict(METRICS),
            max_steps=config.length,
        )

    def make_episode(self, parameters: Mapping[str, Any], seed: int) -> CrafterEpisode:
        return CrafterEpisode(_Config(parameters), self._validate, seed)


class CrafterEpisode:
    """One fresh Crafter world; :meth:`artifacts` re-plays it to draw the replay."""

    def __init__(self, config: _Config, validate: spaces.Validator, seed: int) -> None:
        from evopolicy_mcp.environments.crafter.world import Game

        self._config = config
        self._validate = validate
        self._seed = int(seed) % SEED_RANGE
        self._game: Any = Game(self._seed, config.length, config.pixels)
        self._tally = Tally(config.length)
        self._actions = bytearray()
        self._state = "new"

    def reset(self) -> Any:
        if self._state != "new":
            raise AdapterError(f"reset() on a {self._state} episode; make a new episode")
        image = self._game.reset()
        self._state = "running"
        player = self._game.player
        self._tally.start(_pos(player), _face(player), player.inventory)
        self._tally.health_lost = player.health_lost  # the player fills it in as it is hurt
        return self._observation(image)

    def step(self, action: Any) -> Step:
        if self._state != "running":
            raise AdapterError(f"step() on a {self._state} episode (reset() first, once)")
        index = self._validate(action)
        game, tally = self._game, self._tally
        known = len(game.unlocked)
        image, reward, _, _ = game.step(index)
        self._actions.append(index)
        player = game.player
        new = game.unlocked - tally.first.keys() if len(game.unlocked) > known else ()
        tally.step(index, _pos(player), _face(player), player.inventory, player.sleeping, new)
        terminated = player.health <= 0
        truncated = not terminated and game.steps >= self._config.length
        if terminated:
            tally.died, tally.cause = True, player.last_cause or "unknown"
        if terminated or truncated:
            self._state = "over"
        return Step(self._observation(image), float(reward), terminated, truncated)

    def _observation(self, image: Any) -> Any:
        if self._config.pixels:
            return image
        game = self._game
        player = game.player
        terrain, entities = game.local_view()
        return {
            "terrain": terrain,
            "entities": entities,
            "inventory": {k: int(v) for k, v in player.inventory.items()},
            "facing": _FACING_INDEX[_face(player)],
            "sleeping": int(player.sleeping),
            "daylight": round(game.daylight, 4),
        }

    def metrics(self) -> dict[str, float]:
        return self._tally.metrics()

    def report(self) -> dict[str, Any]:
        return self._tally.report()

    def artifacts(self) -> dict[str, bytes]:
        """``trajectory.jsonl.gz`` and ``replay.gif`` of this episode, by re-playing it."""
        from evopolicy_mcp.environments.crafter.world import Game

        if self._state in ("new", "closed") or not self._actions:
            return {}  # nothing happened that a replay could show
        replay = Game(self._seed, self._config.length, False)
        header = {
            "observation": self._config.observation,
            "horizon": self._config.length,
            "steps": len(self._actions),
            "end": self._tally.end,
            "cause_of_death": self._tally.cause,
        }
        files = replay_files(replay, bytes(self._actions), header)
        if _state(replay) != _state(self._game):
            raise AdapterError("the replay of a crafter episode diverged from the episode")
        return files

    def close(self) -> None:
        self._state, self._game = "closed", None


def _pos(player: Any) -> tuple[int, int]:
    return int(player.pos[0]), int(player.pos[1])


def _face(player: Any) -> tuple[int, int]:
    return int(player.facing[0]), int(player.facing[1])


def _state(game: Any) -> tuple[Any, ...]:
    player = game.player
    return game.steps, _pos(player), tuple(player.inventory.values()), sorted(game.unlocked)


def make_adapter() -> CrafterAdapter:
    return CrafterAdapter()
