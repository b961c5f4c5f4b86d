"""The PySpark pipeline on Raftwood (pipeline.py): copy it, or run it as a script."""
