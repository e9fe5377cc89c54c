"""Alerts: a project's rules (a run ended in a state, a metric crossed a threshold, no learning signal for N steps),
each delivered once per run by e-mail and/or webhook; listed, muted and deleted on the project's page."""
