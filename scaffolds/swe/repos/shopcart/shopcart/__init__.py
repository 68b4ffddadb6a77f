from shopcart.cart import Cart
