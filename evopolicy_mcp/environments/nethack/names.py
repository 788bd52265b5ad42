"""NetHack's vocabulary for controller writers: action keys, bottom-line fields, map codes.

The meanings follow the NetHack 3.6 Guidebook and the NetHack Learning Environment
(Kuttler et al., "The NetHack Learning Environment", NeurIPS 2020, arXiv:2006.13760).
Nothing here imports NLE: actions are described from their enum class name, member
name and key code, which the caller reads from the live environment.
"""

from __future__ import annotations

__all__ = [
    "BLSTATS",
    "END_STATUS",
    "OBSERVATIONS",
    "action_label",
    "action_meaning",
    "key_name",
]

# The 27 entries of the bottom-line statistics vector (NLE's NLE_BL_* indices).
BLSTATS: list[tuple[str, str]] = [
    ("x", "your column on the map, 0..78 (index into the second axis of the map arrays)"),
    ("y", "your row on the map, 0..20 (index into the first axis)"),
    ("strength_percentage", "strength 3..25 as shown (18/xx strengths folded in)"),
    ("strength", "strength 3..125 (18/01..18/100 map to 19..118)"),
    ("dexterity", "dexterity 3..25"),
    ("constitution", "constitution 3..25"),
    ("intelligence", "intelligence 3..25"),
    ("wisdom", "wisdom 3..25"),
    ("charisma", "charisma 3..25"),
    ("score", "the in-game score shown on the bottom line"),
    ("hitpoints", "current hit points; 0 or below is death"),
    ("max_hitpoints", "maximum hit points"),
    ("depth", "dungeon depth (1 = the first level; deeper is larger)"),
    ("gold", "gold pieces carried"),
    ("energy", "current magic energy (power)"),
    ("max_energy", "maximum magic energy"),
    ("armor_class", "armour class: lower is better (10 = unarmoured, can go below 0)"),
    ("monster_level", "hit dice while polymorphed into a monster, else 0"),
    ("experience_level", "experience level, 1..30"),
    ("experience_points", "experience points"),
    ("time", "game turns elapsed (does not advance on menus or free actions)"),
    (
        "hunger_state",
        "0 satiated, 1 not hungry, 2 hungry, 3 weak, 4 fainting, 5 fainted, 6 starved",
    ),
    (
        "carrying_capacity",
        "0 unencumbered, 1 burdened, 2 stressed, 3 strained, 4 overtaxed, 5 overloaded",
    ),
    ("dungeon_number", "which branch: 0 the Dungeons of Doom, 2 the Gnomish Mines, ..."),
    ("level_number", "level number within the branch"),
    (
        "condition",
        "bit mask of conditions (stoned, slimed, strangled, food poisoning, "
        "terminally ill, blind, deaf, stunned, confused, hallucinating, levitating, flying, riding)",
    ),
    ("alignment", "alignment: -1 chaotic, 0 neutral, 1 lawful"),
]

# How an NLE episode ended (info["end_status"]).
END_STATUS = {-1: "aborted", 0: "running", 1: "death", 2: "task_successful"}

OBSERVATIONS: dict[str, str] = {
    "glyphs": "NetHack glyph id (0..5975) of every cell of the 21x79 map: which monster, "
    "object, trap or terrain is shown there; the same id always means the same thing",
    "chars": "the character shown in every map cell, as its byte (ord): '@' you or a human, "
    "letters monsters, '.' floor, '#' corridor (or tree, sink), '<' '>' stairs up and down, "
    "'+' a door or spellbook, '|' '-' walls or open doors, ' ' unexplored or dark",
    "colors": "the colour (0..15, NetHack's colour numbers) of every map cell",
    "specials": "per-cell flag bits: 1 corpse, 2 invisible monster, 4 detected monster, "
    "8 your pet, 16 ridden, 32 statue, 64 pile of objects, 128 lava (monochrome)",
    "blstats": "the bottom-line statistics, 27 integers (see components)",
    "message": "the top-line message as bytes, NUL-padded: "
    "bytes(message).rstrip(b'\\x00').decode('latin-1'); empty when there is none",
    "inv_glyphs": "glyph id of each of up to 55 inventory items (5976 = empty slot)",
    "inv_letters": "the letter (as its byte) of each inventory item, 0 for an empty slot",
    "inv_oclasses": "object class of each inventory item (NetHack's class numbers; 18 = empty)",
    "inv_strs": "the description of each inventory item, 80 bytes each, NUL-padded "
    "(e.g. 'a +1 long sword (weapon in hand)')",
    "tty_chars": "the whole 24x80 terminal as the player sees it (message line, map, bottom "
    "lines), as bytes",
    "tty_colors": "the colour of each terminal cell",
    "tty_cursor": "row and column of the terminal cursor",
    "glyphs_crop": "glyphs of the 9x9 cells centred on you",
    "chars_crop": "chars of the 9x9 cells centred on you",
    "colors_crop": "colors of the 9x9 cells centred on you",
    "specials_crop": "specials of the 9x9 cells centred on you",
}

_DIRECTIONS = {
    "N": "north (up)",
    "E": "east (right)",
    "S": "south (down)",
    "W": "west (left)",
    "NE": "north-east",
    "SE": "south-east",
    "SW": "south-west",
    "NW": "north-west",
}

_COMMANDS = {
    "APPLY": "apply (use) a tool; asks which item",
    "CAST": "cast a spell",
    "CLOSE": "close a door; asks the direction",
    "DROP": "drop an item; asks which",
    "EAT": "eat something; asks which (or what is on the floor)",
    "ENGRAVE": "engrave on the floor (Elbereth scares most monsters)",
    "ESC": "Escape: cancel the current prompt or menu",
    "FIGHT": "fight in a direction even if nothing is seen there",
    "FIRE": "fire from the quiver",
    "INVENTORY": "show the inventory (a free action)",
    "KICK": "kick; asks the direction (opens locked doors, hurts)",
    "LOOK": "look at what is here",
    "LOOT": "loot a box or container here",
    "OPEN": "open a door; asks the direction",
    "PAY": "pay a shopkeeper",
    "PICKUP": "pick up what is here",
    "PRAY": "pray to your god (can fix low hit points or hunger, not too often)",
    "PUTON": "put on a ring or amulet",
    "QUAFF": "drink a potion",
    "READ": "read a scroll or spellbook",
    "REMOVE": "remove a ring or amulet",
    "SEARCH": "search adjacent squares for hidden doors and passages (takes a turn)",
    "SWAP": "swap primary and secondary weapons",
    "TAKEOFF": "take off armour",
    "THROW": "throw an item",
    "TRAVEL": "travel to a map position (then choose it)",
    "WEAR": "wear armour",
    "WIELD": "wield a weapon",
    "ZAP": "zap a wand",
}


def key_name(code: int) -> str:
    """The key as a person types it: 'k', 'Enter', '^D', 'M-c'."""
    if code == 13:
        return "Enter"
    if code == 27:
        return "Esc"
    if code < 32:
        return "^" + chr(code + 64)
    if code >= 128:
        return "M-" + chr(code - 128)
    return chr(code)


def action_label(kind: str, name: str) -> str:
    """A short name for histograms: 'move N', 'run N', 'eat', 'More'."""
    if kind == "CompassDirection":
        return f"move {name}"
    if kind == "CompassDirectionLonger":
        return f"run {name}"
    if kind == "MiscAction" and name == "MORE":
        return "More"
    if kind == "TextCharacters":
        return f"type {name.lower()}"
    return name.lower()


def action_meaning(kind: str, name: str, code: int) -> str:
    """What an action does, with its key."""
    key = key_name(code)
    if kind == "CompassDirection":
        return f"move one square {_DIRECTIONS[name]}; moving into a monster attacks it (key {key})"
    if kind == "CompassDirectionLonger":
        return f"run {_DIRECTIONS[name]} until something interesting happens (key {key})"
    if kind == "MiscDirection":
        return {
            "UP": f"go up a staircase you stand on (key {key})",
            "DOWN": f"go down a staircase you stand on (key {key})",
            "WAIT": f"rest one turn (key {key})",
        }.get(name, f"{name.lower()} (key {key})")
    if kind == "MiscAction" and name == "MORE":
        return "Enter: dismiss a --More-- message or confirm (key Enter)"
    if kind == "TextCharacters":
        return f"type the character {key!r} (answers prompts) (key {key})"
    text = _COMMANDS.get(name)
    return f"{text} (key {key})" if text else f"the {name.lower()} command (key {key})"
