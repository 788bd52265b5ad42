"""Crafter's vocabulary: materials, creatures, actions, inventory items, the view's size.

Shared by the adapter (spaces and texts), the world (ids) and the report; imports nothing.
"""

from __future__ import annotations

__all__ = [
    "ACTIONS",
    "DEATH_CAUSES",
    "ENTITIES",
    "FACING",
    "ITEMS",
    "MATERIALS",
    "VIEW_COLS",
    "VIEW_ROWS",
    "VITALS",
]

MATERIALS = (
    "out_of_world",
    "water",
    "grass",
    "stone",
    "path",
    "sand",
    "tree",
    "lava",
    "coal",
    "iron",
    "diamond",
    "table",
    "furnace",
)
ENTITIES = (
    "none",
    "player",
    "cow",
    "zombie",
    "skeleton",
    "arrow_left",
    "arrow_right",
    "arrow_up",
    "arrow_down",
    "plant_young",
    "plant_ripe",
    "fence",
)
VIEW_ROWS, VIEW_COLS = 7, 9
ACTIONS = (
    "noop",
    "move_left",
    "move_right",
    "move_up",
    "move_down",
    "do",
    "sleep",
    "place_stone",
    "place_table",
    "place_furnace",
    "place_plant",
    "make_wood_pickaxe",
    "make_stone_pickaxe",
    "make_iron_pickaxe",
    "make_wood_sword",
    "make_stone_sword",
    "make_iron_sword",
)
ITEMS = (
    "health",
    "food",
    "drink",
    "energy",
    "sapling",
    "wood",
    "stone",
    "coal",
    "iron",
    "diamond",
    "wood_pickaxe",
    "stone_pickaxe",
    "iron_pickaxe",
    "wood_sword",
    "stone_sword",
    "iron_sword",
)
VITALS = ITEMS[:4]
FACING = {(-1, 0): "left", (1, 0): "right", (0, -1): "up", (0, 1): "down"}
DEATH_CAUSES = ("thirst", "starvation", "exhaustion", "zombie", "arrow", "lava")
