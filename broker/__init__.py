"""Everything that runs: the asyncio server, request handlers, the replica manager,
purgatory, the CLI and (later) the replica fetcher and the Raft controller."""
