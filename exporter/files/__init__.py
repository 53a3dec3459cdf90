"""Files at the edge: JSON Lines read and written (plain, gzip, standard streams), bounded.

The records package decodes what these read; nothing pure opens a file.
"""
