"""Job-shop scheduling by dispatching: build a schedule one operation at a time.

n jobs each visit all m machines once, in their own order, for an integer time on each;
a machine does one operation at a time and a job's operations run in order. Instances
follow E. Taillard, "Benchmarks for basic scheduling problems" (European Journal of
Operational Research 64, 1993): times uniform in 1..99, each job's machine order a
uniform permutation. Each step names a job; its next operation starts as early as both
the job (its previous operation done) and the machine (its last scheduled operation
done) allow. The aim is a short makespan (the time the last operation ends).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, InvalidAction, Step
from evopolicy_mcp.environments.turns import Options, Param, TurnEpisode, game_spec

PARAMETERS = {
    "jobs": Param(10, 2, 100, "jobs"),
    "machines": Param(10, 2, 50, "machines (each job has one operation on each)"),
}
METRICS = {
    "score": "lower bound / makespan, the bound being the larger of the longest job's total "
    "time and the busiest machine's total time (1 = provably optimal)",
    "makespan": "the schedule's makespan",
    "lower_bound": "max(longest job, busiest machine)",
}


def generate(jobs: int, machines: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """order [job][k] (machine of the job's k-th operation) and time [job][k]."""
    rng = np.random.default_rng(seed)
    times = rng.integers(1, 99, size=(jobs, machines), endpoint=True)
    order = np.stack([rng.permutation(machines) for _ in range(jobs)])
    return order.astype(np.int64), times.astype(np.int64)


def spec(options: Options) -> EnvSpec:
    n, m = options.jobs, options.machines
    actions = spaces.discrete(
        n, description="the job whose next operation to schedule; a finished job is invalid_action"
    )
    arr = "int64 array"
    observation = spaces.dict_of(
        {
            "next_op": spaces.box(
                0, m, (n,), "int64", description=f"{arr}: operations done per job (m = finished)"
            ),
            "job_ready": spaces.box(
                0, np.inf, (n,), "int64", description=f"{arr}: when each job's last operation ends"
            ),
            "machine_ready": spaces.box(
                0,
                np.inf,
                (m,),
                "int64",
                description=f"{arr}: when each machine's last operation ends",
            ),
        },
        description="the schedule so far; the first observation also holds order (int64 "
        "[jobs][machines]: machine of each job's k-th operation) and time (int64 "
        "[jobs][machines]: its duration)",
    )
    meta = {"jobs": n, "machines": m, "times": [1, 99]}
    return game_spec(observation, actions, meta, METRICS, n * m)


class Game(TurnEpisode):
    def __init__(self, options: Options, seed: int) -> None:
        super().__init__()
        self.load(*generate(options.jobs, options.machines, seed))

    def load(self, order: np.ndarray, times: np.ndarray) -> None:
        """Schedule this instance (order and times [job][k]); tests build their own."""
        self.n, self.m = order.shape
        self.order, self.times = order, times
        self.order_list, self.time_list = order.tolist(), times.tolist()
        self.next_op = [0] * self.n
        self.job_ready = [0] * self.n
        self.machine_ready = [0] * self.m
        self.done = 0
        jobs = int(times.sum(axis=1).max())
        load = np.zeros(self.m, dtype=np.int64)
        np.add.at(load, order.reshape(-1), times.reshape(-1))
        self.bound = max(jobs, int(load.max()))
        self.check = spaces.action_validator(spaces.discrete(self.n))

    def _observation(self) -> dict[str, Any]:
        return {
            "next_op": np.array(self.next_op, dtype=np.int64),
            "job_ready": np.array(self.job_ready, dtype=np.int64),
            "machine_ready": np.array(self.machine_ready, dtype=np.int64),
        }

    def _begin(self) -> dict[str, Any]:
        obs = self._observation()
        obs.update(order=self.order.copy(), time=self.times.copy())
        return obs

    def _play(self, action: Any) -> Step:
        j = self.check(action)
        k = self.next_op[j]
        if k == self.m:
            raise InvalidAction(f"job {j} has no operation left")
        machine = self.order_list[j][k]
        end = max(self.job_ready[j], self.machine_ready[machine]) + self.time_list[j][k]
        self.job_ready[j] = self.machine_ready[machine] = end
        self.next_op[j] = k + 1
        self.done += 1
        finished = self.done == self.n * self.m
        reward = self.bound / self.makespan() if finished else 0.0
        return Step(self._observation(), reward, finished, False)

    def makespan(self) -> int:
        return max(self.machine_ready)

    def _metrics(self) -> dict[str, float]:
        finished = self.done == self.n * self.m
        return {
            "score": self.bound / self.makespan() if finished else 0.0,
            "makespan": float(self.makespan()),
            "lower_bound": float(self.bound),
        }
