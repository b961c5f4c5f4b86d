"""The Kafka wire format, sans-IO: bytes in, messages out, and back.

Nothing in this package opens a socket, touches asyncio or knows broker state.
It imports the standard library, crc32c and kafka-python's message classes only.
"""
