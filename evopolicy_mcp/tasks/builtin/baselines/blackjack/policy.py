"""Baseline: hit until the hand reaches 20, then stick.

A deliberately weak starting point: it ignores the dealer's card and the
usable ace. The observation is a list [player_sum, dealer_card, usable_ace].
"""

STICK, HIT = 0, 1


def make_policy(context):
    return HitBelowTwenty()


class HitBelowTwenty:
    def act(self, observation):
        player_sum = observation[0]
        return HIT if player_sum < 20 else STICK
