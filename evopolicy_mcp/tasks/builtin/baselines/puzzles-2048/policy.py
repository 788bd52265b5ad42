"""Baseline: the first legal move in the fixed order down, left, right, up (keeps big tiles
in the bottom-left corner, loosely). About 2,000-3,000 points on 4 x 4.
"""

ORDER = (2, 3, 1, 0)  # down, left, right, up (actions: 0 up, 1 right, 2 down, 3 left)


def make_policy(context):
    return Corner()


def lines(board, direction):
    """The board's lines as lists, each read toward the side ``direction`` slides to."""
    n = len(board)
    if direction == 3:
        return [list(row) for row in board]
    if direction == 1:
        return [list(row)[::-1] for row in board]
    columns = [[board[r][c] for r in range(n)] for c in range(n)]
    return columns if direction == 0 else [col[::-1] for col in columns]


def changes(line):
    """Whether sliding ``line`` toward its start moves or merges anything."""
    tiles = [v for v in line if v]
    if tiles != line[: len(tiles)]:
        return True
    return any(tiles[k] == tiles[k + 1] for k in range(len(tiles) - 1))


class Corner:
    def act(self, board):
        board = board.tolist()
        for direction in ORDER:
            if any(changes(line) for line in lines(board, direction)):
                return direction
        return ORDER[0]
