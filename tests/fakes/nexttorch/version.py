# torch/version.py of the torch the nexttorch fakes pretend to be.
__version__ = '3.0.0'
