"""Files: atomic writes and locks, the JSON encoding, and the command line's formats.

IO layer: this package imports nothing; its modules sit at two levels (see each).
"""
