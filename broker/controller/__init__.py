"""Cluster metadata and the controller.

state.py    the replicated state machine (pure, replay-safe apply methods)
store.py    how commands reach it: a Raft group (pysyncobj) or, alone, a local file
controller.py  the controller's decisions, active on the Raft leader only
lifecycle.py   each broker's registration, heartbeats and controlled shutdown
replica_state.py  Kafka's replica state machine table
"""
