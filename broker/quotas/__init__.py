"""Client quotas (KIP-13, KIP-55, KIP-546): the entities and keys, and their enforcement."""
