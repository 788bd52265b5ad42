"""Baseline: meet-in-the-middle search at the first step, three moves from the scramble and
three from the solved cube, so it solves (optimally) any scramble of up to six turns and
gives up on longer ones (then it turns U until the move limit).

The moves come from the task's metadata: after move m, sticker i shows the colour that
sticker permutations[m][i] showed before.
"""


def make_policy(context):
    return MeetInMiddle(context.metadata["permutations"])


class MeetInMiddle:
    def __init__(self, tables):
        self.tables = tables
        self.inverse = [m - m % 3 + 2 - m % 3 for m in range(18)]  # X <-> X', X2 <-> X2
        self.moves = None

    def apply(self, state, move):
        return tuple(state[i] for i in self.tables[move])

    def around(self, start, depth):
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
                    s = self.apply(state, m)
                    if s not in found:
                        found[s] = path + [m]
                        nxt.append(s)
            layer = nxt
        return found

    def act(self, cube):
        if self.moves is None:
            ahead = self.around(tuple(int(v) for v in cube.reshape(-1)), 3)
            back = self.around(tuple(i // 9 for i in range(54)), 3)
            best = None
            for state, path in ahead.items():
                if state in back:
                    whole = path + [self.inverse[m] for m in reversed(back[state])]
                    if best is None or len(whole) < len(best):
                        best = whole
            self.moves = list(reversed(best)) if best else []
        return self.moves.pop() if self.moves else 0
