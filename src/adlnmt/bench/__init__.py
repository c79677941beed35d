"""`adlnmt bench`."""
