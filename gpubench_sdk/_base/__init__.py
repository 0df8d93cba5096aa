"""The leaves: types, the error tree, secrets, shared validation, health windows, the
version. Everything may import them; they import nothing of gpubench's outside this folder."""
