"""Forward passes of real transformer families in NumPy, yielding what each layer's attention sees."""
