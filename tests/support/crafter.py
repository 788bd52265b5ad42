"""Shared pieces of the Crafter tests: the adapter, a short horizon, a hand-written policy."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import numpy as np

from evopolicy_mcp.environments.crafter.adapter import (
    make_adapter,
)
from evopolicy_mcp.environments.crafter.names import ACTIONS

ADAPTER = make_adapter()
SHORT = {"observation": "symbolic", "length": 300}
ROOT = Path(__file__).resolve().parents[2]

# md5 of the world (terrain, then each object's type and position) of crafter.Env(seed=s)
# after reset, made with crafter 1.8.3 and opensimplex 0.4.5.1 in a separate environment.
WORLDS_WITH_OPENSIMPLEX_0_4 = {
    0: "636c153eb8b0fffe604d96f37852b97e",
    7: "a548f1053504dc09d61ed7d550b8ed8d",
    123456789: "ccb7c9942e26443e633f7cf1ab5838b1",
    2**31 - 2: "205ffcfb371c30bd241cdaec48ea2eb7",
}

# Collects wood from the nearest visible tree, places a table, makes a pickaxe and a
# sword, drinks when thirsty and hits zombies that come next to it.
WOOD_AND_TABLE = """
import random

TREE, TABLE, WATER, ZOMBIE = 6, 11, 1, 3
FREE = (2, 4, 5)  # grass, path, sand
STEP = {1: (-1, 0), 2: (1, 0), 3: (0, -1), 4: (0, 1)}  # move action -> (dx, dy)
FACING = ((-1, 0), (1, 0), (0, -1), (0, 1))


def make_policy(context):
    return WoodAndTable(context)


class WoodAndTable:
    def __init__(self, context):
        self.rng = random.Random(context.policy_seed)
        self.table_wood = context.metadata["rules"]["place"]["table"]["uses"]["wood"]
        self.explore = 1

    def act(self, obs):
        terrain, entities, inv = obs["terrain"], obs["entities"], obs["inventory"]
        dx, dy = FACING[obs["facing"]]
        ahead = int(terrain[3 + dy][4 + dx])
        near_table = any(int(terrain[3 + j][4 + i]) == TABLE for i in (-1, 0, 1) for j in (-1, 0, 1))
        if near_table and inv["wood"] >= 1:
            if inv["wood_pickaxe"] == 0:
                return 11
            if inv["wood_sword"] == 0:
                return 14
        if not near_table and inv["wood"] >= self.table_wood + 2 and ahead in FREE:
            return 8
        for action, (x, y) in STEP.items():
            if int(entities[3 + y][4 + x]) == ZOMBIE:
                return 5 if (x, y) == (dx, dy) else action
        if ahead == WATER and inv["drink"] < 9:
            return 5
        if inv["drink"] < 5:
            return self.toward(terrain, WATER)
        if ahead == TREE and (inv["wood"] < self.table_wood + 2 or inv["wood_sword"]):
            return 5
        return self.toward(terrain, TREE)

    def toward(self, terrain, target):
        cells = [
            (abs(c - 4) + abs(r - 3), c - 4, r - 3)
            for r in range(7) for c in range(9) if int(terrain[r][c]) == target
        ]
        if not cells:
            if self.rng.random() < 0.1:
                self.explore = self.rng.choice((1, 2, 3, 4))
            return self.explore
        _, x, y = min(cells)
        if abs(x) + abs(y) == 1:  # moving into the target only turns towards it
            return {(-1, 0): 1, (1, 0): 2, (0, -1): 3, (0, 1): 4}[(x, y)]
        options = ([1 if x < 0 else 2] if x else []) + ([3 if y < 0 else 4] if y else [])
        free = [a for a in options if int(terrain[3 + STEP[a][1]][4 + STEP[a][0]]) in FREE]
        return self.rng.choice(free or options)
"""


def world_md5(game: Any) -> str:
    world = game._world
    digest = hashlib.md5(world._mat_map.tobytes())
    for obj in world.objects:
        name = next(c.__name__ for c in type(obj).__mro__ if c.__module__ == "crafter.objects")
        digest.update(f"{name}:{int(obj.pos[0])},{int(obj.pos[1])};".encode())
    return digest.hexdigest()


def rollout(parameters: dict[str, Any], seed: int, actions: list[int], heal: bool = False) -> Any:
    """Rewards, flags, a digest of the observations and the metrics of one episode."""
    episode = ADAPTER.make_episode(parameters, seed)
    digest = hashlib.md5()
    record: list[Any] = []
    obs = episode.reset()
    for action in actions:
        if heal:  # keeps the player alive through the night
            episode._game.player.inventory["health"] = 9
        step = episode.step(action)
        obs = step.observation
        parts = [obs] if isinstance(obs, np.ndarray) else [obs["terrain"], obs["entities"]]
        for part in parts:
            digest.update(part.tobytes())
        record.append((step.reward, step.terminated, step.truncated))
        if step.terminated or step.truncated:
            break
    player = episode._game.player
    state = (episode._game.steps, tuple(player.pos), dict(player.inventory), episode.metrics())
    episode.close()
    return record, digest.hexdigest(), state


def random_actions(seed: int, n: int = 400) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(len(ACTIONS)) for _ in range(n)]
