"""``samloc serve``'s library: a bot over HTTP (PROTOCOL §4) and a page to play against it.

One module per concern: :mod:`.bots` (the served agents and which plays each table),
:mod:`.protocol` (what clients send), :mod:`.sessions` (the play page's sessions and their
store), :mod:`.edge` (limits and headers every connection meets), :mod:`.app` (the ASGI app
and its routes), :mod:`.workers` (serving in one or several processes) and :mod:`.shipped`
(where the shipped checkpoints are).  The command line is :mod:`samloc.commands.serve`.
"""
