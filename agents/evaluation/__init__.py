"""Players against each other: matches, evaluation, league, ratings, reports, benchmarks."""
