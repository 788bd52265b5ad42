"""Baseline: take the shortest path to the food through free cells; with none, step to the
neighbour with the most room (free cells reachable from it). Moves: 0 up, 1 right, 2 down,
3 left.
"""

from collections import deque

STEPS = ((-1, 0), (0, 1), (1, 0), (0, -1))


def make_policy(context):
    return Greedy()


def open_cell(board, r, c):
    rows, cols = len(board), len(board[0])
    return 0 <= r < rows and 0 <= c < cols and board[r][c] <= 1  # free, food or the tail


class Greedy:
    def act(self, board):
        board = board.tolist()
        rows, cols = len(board), len(board[0])
        head = max(
            ((r, c) for r in range(rows) for c in range(cols)), key=lambda p: board[p[0]][p[1]]
        )
        first = {}
        queue = deque()
        for d, (dr, dc) in enumerate(STEPS):
            cell = (head[0] + dr, head[1] + dc)
            if open_cell(board, *cell):
                first[cell] = d
                queue.append(cell)
        while queue:
            r, c = queue.popleft()
            if board[r][c] == -1:
                return first[(r, c)]
            for dr, dc in STEPS:
                cell = (r + dr, c + dc)
                if cell not in first and open_cell(board, *cell):
                    first[cell] = first[(r, c)]
                    queue.append(cell)
        best, room = 0, -1
        for d, (dr, dc) in enumerate(STEPS):
            start = (head[0] + dr, head[1] + dc)
            if not open_cell(board, *start):
                continue
            seen, stack = {start}, [start]
            while stack:
                r, c = stack.pop()
                for er, ec in STEPS:
                    cell = (r + er, c + ec)
                    if cell not in seen and open_cell(board, *cell):
                        seen.add(cell)
                        stack.append(cell)
            if len(seen) > room:
                best, room = d, len(seen)
        return best
