"""maxkernel executor on Ray: each candidate is judged on a host of a Ray cluster.

The orchestrator (``maxkernel run`` / ``bench``) stays on one machine and owns the
run store; each evaluation goes, as Task and Candidate JSON, to an actor on a
cluster host that keeps that host's own backend (and its sandboxed worker pool)
warm, and comes back as Evaluation JSON. Importing this package does not import
Ray: without it installed, selecting the executor says how to install it.
"""
