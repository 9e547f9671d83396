"""Attack: os._exit(0) while being imported."""
import os

os._exit(0)
