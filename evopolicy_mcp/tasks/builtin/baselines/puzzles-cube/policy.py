"""Baseline: meet-in-the-middle search at the first step, three moves from the scramble and
three from the solved cube, so it solves (optimally) any scramble of up to six turns and
gives up on longer ones (then it turns U until the move limit).

The move tables are built from the cube's geometry, as the task describes the sticker
order: faces U R F D L B, rows as seen from outside the face.
"""

FACES = "URFDLB"
NORMALS = {
    "U": (0, 1, 0),
    "R": (1, 0, 0),
    "F": (0, 0, 1),
    "D": (0, -1, 0),
    "L": (-1, 0, 0),
    "B": (0, 0, -1),
}
LAYOUT = {
    "U": ((1, 0, 0), (0, 0, 1)),
    "R": ((0, 0, -1), (0, -1, 0)),
    "F": ((1, 0, 0), (0, -1, 0)),
    "D": ((1, 0, 0), (0, 0, -1)),
    "L": ((0, 0, 1), (0, -1, 0)),
    "B": ((-1, 0, 0), (0, -1, 0)),
}


def make_policy(context):
    return MeetInMiddle()


def turn(v, a):
    cross = (a[1] * v[2] - a[2] * v[1], a[2] * v[0] - a[0] * v[2], a[0] * v[1] - a[1] * v[0])
    along = sum(x * y for x, y in zip(a, v, strict=True))
    return tuple(a[i] * along - cross[i] for i in range(3))


def move_tables():
    stickers = []
    for face in FACES:
        n, (right, down) = NORMALS[face], LAYOUT[face]
        for row in (-1, 0, 1):
            for col in (-1, 0, 1):
                stickers.append((tuple(n[i] + col * right[i] + row * down[i] for i in range(3)), n))
    where = {s: i for i, s in enumerate(stickers)}
    tables = []
    for face in FACES:
        axis = NORMALS[face]
        perm = list(range(54))
        for i, (pos, normal) in enumerate(stickers):
            if sum(x * y for x, y in zip(pos, axis, strict=True)) == 1:
                perm[where[(turn(pos, axis), turn(normal, axis))]] = i
        twice = [perm[perm[i]] for i in range(54)]
        thrice = [perm[twice[i]] for i in range(54)]
        tables += [perm, twice, thrice]
    return tables


TABLES = move_tables()
INVERSE = [m - m % 3 + 2 - m % 3 for m in range(18)]  # X <-> X', X2 <-> X2


def apply(state, move):
    table = TABLES[move]
    return tuple(state[table[i]] for i in range(54))


def frontier(start, depth):
    """Every state within ``depth`` moves of ``start`` -> the moves reaching it."""
    found = {start: []}
    layer = [start]
    for _ in range(depth):
        nxt = []
        for state in layer:
            path = found[state]
            for m in range(18):
                if path and m // 3 == path[-1] // 3:
                    continue
                s = apply(state, m)
                if s not in found:
                    found[s] = path + [m]
                    nxt.append(s)
        layer = nxt
    return found


class MeetInMiddle:
    def __init__(self):
        self.moves = None

    def act(self, cube):
        if self.moves is None:
            start = tuple(int(v) for v in cube.reshape(-1))
            solved = tuple(i // 9 for i in range(54))
            ahead = frontier(start, 3)
            back = frontier(solved, 3)
            best = None
            for state, path in ahead.items():
                if state in back:
                    whole = path + [INVERSE[m] for m in reversed(back[state])]
                    if best is None or len(whole) < len(best):
                        best = whole
            self.moves = list(reversed(best)) if best else []
        return self.moves.pop() if self.moves else 0
