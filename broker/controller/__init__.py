"""Cluster metadata and the controller.

state.py    the replicated state machine (pure, replay-safe apply methods)
commands.py one typed command per apply method, and the journal's wire form of them
metadata_client.py  the rest of the broker's way in: one method per operation
store.py    how commands reach it: a Raft group (pysyncobj) or, alone, a local file
metadata_file.py  the lone broker's local file (versioned JSON)
controller.py  the controller's decisions, active on the Raft leader only
lifecycle.py   each broker's registration, heartbeats and controlled shutdown
replica_state.py  Kafka's replica state machine table
"""
