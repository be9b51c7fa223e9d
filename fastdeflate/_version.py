__version__ = "0.1.0"
"""This fastdeflate's version (PEP 440), as ``pip show fastdeflate`` gives it."""
