from inventory.stock import Stock
