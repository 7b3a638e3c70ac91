"""The run loop and its parts: workers, scheduler, rollouts, learner, evaluation, run log, launch."""
