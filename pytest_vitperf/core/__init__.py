"""The foundation every other room stands on: the precision registry, the run's settings, the project's files and its
one user-facing error. Nothing here imports another room of the package."""
