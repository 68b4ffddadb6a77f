from bank.account import Account, InsufficientFunds
