def hot(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total
