"""The ``gymnasium`` adapter: any registered Gymnasium id, with texts for the classic ones.

A task chooses the environment through its parameters::

    [parameters]
    env_id = "FrozenLake-v1"
    max_episode_steps = 200                           # optional; overrides the id's limit
    kwargs = { map_name = "8x8", is_slippery = true } # optional constructor arguments
    package = "some_package"                          # for ids another package registers

The ids of :mod:`evopolicy_mcp.environments.gymnasium_catalog` get component names,
meanings, metrics and checked constructor arguments; any other id gets its spaces
as Gymnasium describes them (see :mod:`evopolicy_mcp.adapters.gym`).
"""

from __future__ import annotations

from evopolicy_mcp.adapters.gym import GymAdapter
from evopolicy_mcp.environments.gymnasium_catalog import CATALOG

__all__ = ["make_adapter"]


def make_adapter() -> GymAdapter:
    return GymAdapter("gymnasium", CATALOG, example_parameters={"env_id": "CartPole-v1"})
