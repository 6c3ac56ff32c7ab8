"""Reading a run's evaluations as a curve: the one place that says when a run
first reaches a target."""


def steps_to(points, target, higher=True):
    """The first step of `points` ((step, value) pairs in step order) whose
    value reaches `target`: at or above it when higher is better, at or below
    it otherwise (a loss); None when none does."""
    for step, value in points:
        if (value >= target) if higher else (value <= target):
            return step
    return None
