"""Every judgement saltbench makes: per request, per pass, per isolation cell."""
