"""Message layouts kafka-python 3.0.12 does not ship, as JSON in Kafka's schema format.

kafka-python builds its message classes from Kafka's JSON schemas, and its metaclass
takes the package to read them from, so a class declared as::

    class ShareFetchRequest(ApiMessage, load_json=protocol.schemas): pass

reads ``ShareFetchRequest.json`` from this folder and behaves like any kafka-python
message (``Cls[version](**fields)``, ``encode``, ``decode``, ``with_header``).

Each file here is written for Raftwood from the field list of the Kafka message it
names (field names, types, versions, nullable and tagged versions are wire facts);
descriptions are left out.  The file name is the class name; keep ``apiKey``,
``validVersions`` and ``flexibleVersions`` exactly as Kafka has them, and narrow the
range we serve in ``protocol/messages.py`` (``SERVED``), not here.
"""
