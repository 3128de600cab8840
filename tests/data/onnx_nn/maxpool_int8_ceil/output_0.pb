Bout0JqQqbgisgiq
j>HOFu1Fu@7Ó@