// The total of an order: the sum of its lines, less its discount.
export function orderTotal(lines, discount = 0) {
  const sum = lines.reduce((n, line) => n + line.price * line.qty, 0);
  return Math.round(sum * (1 - discount) * 100) / 100;
}
