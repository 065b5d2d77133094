/** Largest id the contract allows: 2^53 − 1, the largest integer every JSON client can hold. */
export const MAX_PLANT_ID = Number.MAX_SAFE_INTEGER;
