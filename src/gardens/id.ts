/** A new garden id: `gdn_` and 24 hex digits (96 random bits). */
export const gardenId = (random: (n: number) => Buffer): string => `gdn_${random(12).toString('hex')}`;

// What gardenId() makes, and what the migrations made for home gardens.
const GARDEN_ID = /^gdn_[0-9a-f]{24}$/;

/** Whether `id` can name a garden at all (anything else is no garden, without asking the store). */
export const isGardenId = (id: string): boolean => GARDEN_ID.test(id);
