

cPlaceholder*
dtype0ç