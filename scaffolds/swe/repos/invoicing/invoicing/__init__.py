from invoicing.invoice import Invoice
