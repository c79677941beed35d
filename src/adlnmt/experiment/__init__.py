"""`adlnmt experiment`."""
