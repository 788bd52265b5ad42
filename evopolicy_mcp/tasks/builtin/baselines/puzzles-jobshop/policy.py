"""Baseline: dispatch the operation that can start earliest (ties: the shorter one, then the
lower job number).
"""


def make_policy(context):
    return EarliestStart()


class EarliestStart:
    def act(self, obs):
        if "order" in obs:
            self.order, self.time = obs["order"].tolist(), obs["time"].tolist()
        nxt, job_ready, machine_ready = obs["next_op"], obs["job_ready"], obs["machine_ready"]
        best = None
        for j in range(len(nxt)):
            k = int(nxt[j])
            if k == len(self.order[j]):
                continue
            start = max(int(job_ready[j]), int(machine_ready[self.order[j][k]]))
            key = (start, self.time[j][k], j)
            if best is None or key < best:
                best = key
        return best[2]
